"""A JSON Schema validator for output schemas given as plain dicts (``Agent(output_schema=)``).

It checks the keywords of JSON Schema 2020-12 that pydantic emits and model providers accept
in structured-output schemas: ``type``, ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties``, ``patternProperties``, ``propertyNames``, ``minProperties`` /
``maxProperties``, ``items``, ``prefixItems`` (and the older ``items`` list with
``additionalItems``), ``minItems`` / ``maxItems``, ``uniqueItems``, ``minimum`` / ``maximum``
and their exclusive forms, ``multipleOf``, ``minLength`` / ``maxLength``, ``pattern``,
``allOf`` / ``anyOf`` / ``oneOf`` / ``not``, and ``$ref`` to a JSON pointer within the schema
(``#/$defs/Name``, ``#``). ``format``, annotations (``title``, ``description``, ``default``)
and other keywords are not checked, as JSON Schema allows.

Values compare as JSON values do: ``true`` is not ``1`` (in ``enum``, ``const`` and
``uniqueItems``), and ``1`` is ``1.0``.

:func:`check_schema` runs when the agent is built, so that a schema that cannot be used (a
``$ref`` to nothing, a pattern that does not compile, ``"minLength": "3"``) fails there,
naming the place, and :func:`schema_errors` never fails on the schema at run time.

The package: ``_validate.py`` checks a value against a schema; ``_schemas.py`` checks the
schema itself.
"""

from ._schemas import check_schema
from ._validate import schema_errors

__all__ = ["check_schema", "schema_errors"]
