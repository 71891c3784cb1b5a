"""Messages encrypted, and bound to their place, at rest on any store: :class:`EncryptedSession`
(``session``), over the envelope of each value (``_envelope``) and the chain of records
(``_chain``). Needs the ``encryption`` extra."""

from ._envelope import AlteredDataError, DecryptionError
from .session import EncryptedSession

__all__ = ["AlteredDataError", "DecryptionError", "EncryptedSession"]
