"""Helpers shared by the tests of several layers (CONTRIBUTING.md, "Where a test goes").

- `actions`: the test action packs (real `ActionSpec`s over in-memory state) and their params.
- `engine`: a recorder of the engine's events and checkpoints.
- `ledger`: an in-memory action ledger (the executor's `LedgerPort`), keyed like the real one.
- `processes`: the `pressloop` command (`command`, `isolated_env`, `pack_env`,
  `start_pressloop`, `stop_process`, `free_port`, `wait_for`) and `pressloop worker` processes
  (`Workers`, `CrashPackWorkers`).
- `serve`: a real `pressloop serve` on a free port (`Serve`): waits for /healthz, reads the
  admin token, stops it and keeps its log.
- `down_site`, `holding_proxy`: small local HTTP servers that stand for a WordPress in trouble.

Action packs loaded by module name in subprocesses (PRESSLOOP_ACTION_PACKS) live in
`tests/fixtures/`, not here.
"""
