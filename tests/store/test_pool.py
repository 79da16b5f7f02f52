"""The PostgreSQL pool's limits are settings: a transaction that cannot get a connection within
PRESSLOOP_DB_POOL_TIMEOUT fails with a clear error instead of waiting 30 s."""

from __future__ import annotations

import asyncio
import time

import pytest
import sqlalchemy as sa

from pressloop.config import Settings
from pressloop.runtime.service import Service


async def test_a_full_pool_fails_after_the_configured_timeout(
    postgres_database: str, tmp_path: object
) -> None:
    settings = Settings(
        database_url=postgres_database,
        data_dir=str(tmp_path),
        db_pool_size=1,
        db_max_overflow=0,
        db_pool_timeout_s=0.5,
    )
    service = await Service.open(settings, upgrade=False)
    try:
        async with service.database.read() as held:
            await held.execute(sa.select(1))
            started = time.monotonic()
            with pytest.raises(sa.exc.TimeoutError):
                async with asyncio.timeout(10), service.database.read() as conn:
                    await conn.execute(sa.select(1))
            waited = time.monotonic() - started
        assert 0.4 < waited < 5
        # The pool works again once the connection is back.
        async with service.database.read() as conn:
            assert (await conn.execute(sa.select(1))).scalar_one() == 1
    finally:
        await service.close()
