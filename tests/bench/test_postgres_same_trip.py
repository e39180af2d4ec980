"""PostgresSaver at the S3 requests' round trip: workload 6's ``postgres-rtt`` saver.

Its connection goes through the proxy's delaying relay to a real PostgreSQL;
every query then waits the proxy's injected round trip (a lower bound is
checked, never a duration).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

from bench import graphs
from bench.meters import set_proxy_delay
from bench.savers import Env, PostgresSameTrip
from bench.workloads.common import cfg

DELAY_MS = 40


@dataclass
class _Server:
    """The session's PostgreSQL as the benchmark's ``Env.postgres`` sees a server."""

    server: Any

    @property
    def port(self) -> int:
        return int(self.server.port)

    def create_database(self, name: str) -> str:
        import psycopg

        name = f"{name}_{uuid.uuid4().hex[:8]}"  # the session's server is shared
        with psycopg.connect(self.server.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return str(self.server.url(name))


def test_postgres_same_trip_runs_a_chat_through_the_delaying_relay(
    env: Env, postgres_server: Any
) -> None:
    env.postgres = _Server(postgres_server)
    spec = PostgresSameTrip()
    assert spec.workloads == ("6a", "6b")
    with spec.open_sync(env) as handle:
        assert handle.simulated_latency
        assert env.postgres_relay_port not in (None, env.postgres.port)
        graph = graphs.chat_graph(handle.saver, graphs.SEED)
        for turn in range(2):
            graph.invoke({"messages": graphs.SEED.inputs(turn)}, cfg("rtt"))
        set_proxy_delay(env.proxy_url, DELAY_MS)
        try:
            started = time.monotonic()
            latest = handle.saver.get_tuple(cfg("rtt"))
            waited = time.monotonic() - started
        finally:
            set_proxy_delay(env.proxy_url, 0)
    assert len(latest.checkpoint["channel_values"]["messages"]) == 5  # system, 2 x (user, bot)
    assert waited >= DELAY_MS / 1000  # the query crossed the relay


def test_the_async_saver_shares_the_relay(env: Env, postgres_server: Any) -> None:
    env.postgres = _Server(postgres_server)
    spec = PostgresSameTrip()

    async def chat() -> tuple[int, int | None]:
        async with spec.open_async(env) as handle:
            graph = graphs.chat_graph(handle.saver, graphs.SEED)
            await graph.ainvoke({"messages": graphs.SEED.inputs(0)}, cfg("rtt-async"))
            latest = await handle.saver.aget_tuple(cfg("rtt-async"))
            first_port = env.postgres_relay_port
        async with spec.open_async(env):
            pass
        return len(latest.checkpoint["channel_values"]["messages"]), first_port

    messages, port = asyncio.run(chat())
    assert messages == 3  # system, user, bot
    assert port is not None and env.postgres_relay_port == port  # one relay per run
