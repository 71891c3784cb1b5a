"""The span attributes aniki sets: the OpenTelemetry GenAI semantic conventions' names, and
aniki's own under ``aniki.*`` for what the conventions have no name for.

The ``gen_ai.*`` names are spelled here rather than imported from
``opentelemetry-semantic-conventions``, which marks them as moved to the GenAI conventions'
own repository and is not needed to emit them; a test checks that they match the ones that
package defines.
"""

from __future__ import annotations

# The operation and who performs it.
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
AGENT_DESCRIPTION = "gen_ai.agent.description"
CONVERSATION_ID = "gen_ai.conversation.id"

# A model call.
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_TOP_P = "gen_ai.request.top_p"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_SEED = "gen_ai.request.seed"
REQUEST_STOP_SEQUENCES = "gen_ai.request.stop_sequences"
REQUEST_PRESENCE_PENALTY = "gen_ai.request.presence_penalty"
REQUEST_FREQUENCY_PENALTY = "gen_ai.request.frequency_penalty"
OUTPUT_TYPE = "gen_ai.output.type"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

# A tool call.
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"

# Contents: only with ``include_content=True``.
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"

# Errors.
ERROR_TYPE = "error.type"
EXCEPTION_EVENT = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"

# aniki's own.
RUN_ID = "aniki.run.id"
"""``RunResult.run_id``."""
LAST_AGENT = "aniki.run.last_agent"
"""The agent that answered last, when a handoff made it another than the one invoked."""
PENDING_APPROVALS = "aniki.run.pending_approvals"
"""How many tool calls the run stopped at, awaiting approval."""
REQUESTS = "aniki.usage.requests"
"""Model calls the run made (agents it called as tools included)."""
UNREPORTED_REQUESTS = "aniki.usage.unreported_requests"
"""Of those, how many reported no token counts (the token figures are then a lower bound)."""
CANCELLED = "aniki.cancelled"
"""The work was cancelled (a stream stopped by its consumer, a run's time up): OpenTelemetry
counts a cancellation as no error, so the status stays unset."""

# The context report of a model call (aniki.ContextReport).
CONTEXT_STORED_MESSAGES = "aniki.context.stored_messages"
CONTEXT_SENT_MESSAGES = "aniki.context.sent_messages"
CONTEXT_SUMMARIZED_MESSAGES = "aniki.context.summarized_messages"
CONTEXT_SHORTENED_MESSAGES = "aniki.context.shortened_messages"
CONTEXT_OMITTED_MESSAGES = "aniki.context.omitted_messages"
CONTEXT_TOKENS = "aniki.context.tokens"
CONTEXT_TOKENS_INSTRUCTIONS = "aniki.context.tokens.instructions"
CONTEXT_TOKENS_TOOLS = "aniki.context.tokens.tools"
CONTEXT_TOKENS_SUMMARY = "aniki.context.tokens.summary"
CONTEXT_TOKENS_HISTORY = "aniki.context.tokens.history"
CONTEXT_PREFIX_KEPT = "aniki.context.prefix_kept"

# A guardrail's check (aniki.Guardrail): a span of its own under the run's.
GUARDRAIL_NAME = "aniki.guardrail.name"
GUARDRAIL_STAGE = "aniki.guardrail.stage"
GUARDRAIL_TRIPPED = "aniki.guardrail.tripped"
GUARDRAIL_REASON = "aniki.guardrail.reason"
"""Only with ``include_content=True``: a reason may quote what it checked."""
