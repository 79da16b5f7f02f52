"""Reconcile against the real local WordPress: after a worker died between a create and its
ledger outcome, did that step's create happen? Exact by the step's marker where the site has the
`pressloop-calls.php` mu-plugin (the local site does); by what the create wrote where it lacks it.
"""

from __future__ import annotations

import pytest

from pressloop.contracts import ActionCall, StepStatus
from pressloop.errors import ActionError
from pressloop.local_wordpress import LocalSite
from tests.wordpress.harness import CONTENT_SPECS as SPECS
from tests.wordpress.harness import Harness


async def test_reconcile_finds_the_post_an_interrupted_create_made(
    wp: Harness, wordpress: LocalSite
) -> None:
    params = {"title": "Tea & <em>cake</em> -50%", "content": "Exactly once"}
    context = wp.context()
    spec = SPECS["create_post"]
    assert spec.reconcile is not None
    validated = spec.params.model_validate(params)
    assert await spec.reconcile(validated, context, wp.services) is None  # nothing made yet

    # The worker died after WordPress made the post, before the outcome reached the ledger.
    call = ActionCall(id="c", name="create_post", params=params)
    await wp.ledger.intent(call, spec.risk, context, None)
    made = await spec.handler(validated, context, wp.services)
    marker = wordpress.run_php(f"echo get_post_meta({made.content['id']}, '_pressloop_call', 1);")
    assert marker == f"run-1:{context.step_index}"
    # Then another step made a post just like it: only the marker tells them apart.
    twin = await spec.handler(validated, wp.context(), wp.services)

    resumed = await wp.executor.run(call, context)  # the same (run, step) again
    assert resumed.status is StepStatus.SUCCEEDED and resumed.data["id"] == made.content["id"]
    assert "found again" in resumed.summary and twin.content["id"] != made.content["id"]
    titles = [p["title"]["raw"] for p in await wp.client.get("/wp/v2/posts", {"status": "draft"})]
    assert titles.count(params["title"]) == 2  # ours and the twin: no third


async def test_without_the_mu_plugin_reconcile_recognises_what_the_create_wrote(
    wp: Harness, wordpress: LocalSite
) -> None:
    (wordpress.docroot / "wp-content/mu-plugins/pressloop-calls.php").unlink()
    spec = SPECS["create_post"]
    assert spec.reconcile is not None
    params = spec.params.model_validate({"title": "Tea & cake -50%", "content": "Exactly once"})
    context = wp.context()
    assert await spec.reconcile(params, context, wp.services) is None
    await wp.client.post("/wp/v2/posts", {"title": params.title, "content": "Other words"})
    made = await spec.handler(params, context, wp.services)
    found = await spec.reconcile(params, context, wp.services)
    assert found is not None and found.content["id"] == made.content["id"]
    assert (
        wordpress.run_php(f"echo get_post_meta({made.content['id']}, '_pressloop_call', 1);") == ""
    )


async def test_reconcile_finds_a_created_category_and_undo_deletes_it(wp: Harness) -> None:
    spec = SPECS["create_category"]
    assert spec.reconcile is not None
    params = spec.params.model_validate({"name": "Recipes & Tips"})
    assert await spec.reconcile(params, wp.context(), wp.services) is None
    created = await wp.ok("create_category", name="Recipes & Tips")
    create_step = wp.step
    wp.step -= 1  # the same (run, step) as the create, as a resumed run asks
    found = await spec.reconcile(params, wp.context(), wp.services)
    assert found is not None and found.content["id"] == created["id"]
    # Another step did not make it: the marker tells them apart.
    assert await spec.reconcile(params, wp.context(), wp.services) is None
    listed = await wp.ok("list_categories", search="Recipes")
    assert [c["name"] for c in listed["categories"]] == ["Recipes & Tips"]

    await wp.undo("create_category", create_step)
    with pytest.raises(ActionError, match="404"):
        await wp.read(f"/wp/v2/categories/{created['id']}")
