"""The run engine behind ``Runner``: a run's plan, its turn loop, tool calls, handoffs, agents
as tools, approvals, streaming and context reports, one module each."""
