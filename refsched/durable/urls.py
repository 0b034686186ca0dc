"""The store behind a URL: ``sqlite:///path.db`` (or a bare path) or ``postgresql://...``.

A module of its own, above both stores, so that neither store module imports the other.
"""

from __future__ import annotations

import os
from typing import Any

from refsched.durable.postgres import PostgresStore
from refsched.durable.store import SQLiteStore, Store
from refsched.errors import InvalidArgumentError

__all__ = ["open_store"]


def open_store(url: str, *, create: bool = True, **options: Any) -> Store:
    """The store behind ``url``."""
    if not isinstance(url, (str, os.PathLike)):
        raise InvalidArgumentError(f"store URL must be a str, not {type(url).__name__}")
    url = os.fspath(url)
    if not isinstance(url, str) or not url:
        raise InvalidArgumentError("store URL must be a non-empty str")
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme in ("", "sqlite"):
        if options.get("schema") is not None:
            raise InvalidArgumentError(f"{url!r}: schema= is for a PostgreSQL store")
        options.pop("schema", None)
        return SQLiteStore(url, create=create, **options)
    if scheme in ("postgresql", "postgres"):
        return PostgresStore(url, create=create, **options)
    raise InvalidArgumentError(f"{url!r}: unknown store (sqlite:///path.db or "
                               "postgresql://user@host/database)")
