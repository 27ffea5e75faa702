"""What a pull request or the Hub can do to publish and pull (issue #30 items 4 and 11, #27.5),
through the real huggingface_hub client against tests/hubserver.py."""

from __future__ import annotations

import pytest

from .conftest import snapshot
from .test_publish import REPO, assert_nothing_recorded, assert_published, cli, hub_files, publish_args, registry, template  # noqa: F401  (fixtures)

pytest_plugins = ["tests.hubserver"]


# -- 11. a server error is not a machine failure, and nothing local changes before the commit lands ---------------


@pytest.mark.parametrize(("endpoint", "status"), [("commit", 501), ("commit", 503), ("preupload", 501), ("create_repo", 501), ("lfs_batch", 501), ("lfs_upload", 501), ("lfs_verify", 501), ("validate_yaml", 501)])
def test_a_server_error_is_exit_4_and_changes_nothing_local(hub_server, registry, cli, instant_retries, endpoint, status):  # noqa: F811
    before = snapshot(registry)
    hub_server.fail_next(endpoint, status=status, times=10)
    result = cli(*publish_args(registry), code=4)
    assert str(status) in result.output or "HfHubHTTPError" in result.output
    assert result.output.count("error: ") == 1, result.output
    assert snapshot(registry) == before  # index.json, README.md and SHA256SUMS still as they were
    assert_nothing_recorded(registry)
    assert hub_server.commits_made == 0
    hub_server.clear_failures()
    cli(*publish_args(registry))
    assert_published(hub_server, registry)
