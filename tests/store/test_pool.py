"""The PostgreSQL pool's limits are settings: a transaction that cannot get a connection within
PRESSLOOP_DB_POOL_TIMEOUT fails with a clear error instead of waiting 30 s. By default a process
opens twice the machine's CPUs (shared by its serving processes), at least 4, and no overflow."""

from __future__ import annotations

import asyncio
import time

import pytest
import sqlalchemy as sa

from pressloop.config import Settings
from pressloop.config.serving import MIN_DB_POOL, usable_cpus
from pressloop.runtime.service import Service
from pressloop.serve_processes import shared_env


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


def test_the_default_pool_is_twice_the_cpus_shared_by_the_serving_processes() -> None:
    assert Settings(db_pool_size=None).resolved_db_pool_size(cpus=8) == 16
    assert Settings(db_pool_size=None, serve_processes=4).resolved_db_pool_size(cpus=8) == 4
    assert Settings(db_pool_size=None).resolved_db_pool_size(cpus=1) == MIN_DB_POOL
    assert Settings(db_pool_size=3).resolved_db_pool_size(cpus=8) == 3  # a setting wins
    assert Settings.model_fields["db_max_overflow"].default == 0
    # The other serving processes are started as one process each: they get the share.
    shared = Settings(db_pool_size=None, serve_processes=2, wp_url=None)
    assert shared_env(shared)["PRESSLOOP_DB_POOL_SIZE"] == str(shared.resolved_db_pool_size())
    assert shared.resolved_db_pool_size() == max(MIN_DB_POOL, usable_cpus())


async def test_a_process_opens_at_most_its_pool_and_no_overflow(
    postgres_database: str, tmp_path: object
) -> None:
    """Requests beyond the pool wait for a connection (none is opened beyond it)."""
    settings = Settings(database_url=postgres_database, data_dir=str(tmp_path), db_pool_size=None)
    size = settings.resolved_db_pool_size()  # this machine's default
    service = await Service.open(settings, upgrade=False)
    try:
        in_use = 0
        most = 0

        async def transaction() -> None:
            nonlocal in_use, most
            async with service.database.read() as conn:
                in_use += 1
                most = max(most, in_use)
                await conn.execute(sa.text("SELECT pg_sleep(0.05)"))
                in_use -= 1

        await asyncio.gather(*(transaction() for _ in range(3 * size)))
        assert most == size
        pool = service.database.engine.pool
        assert pool.size() == size and pool.overflow() <= 0
    finally:
        await service.close()
