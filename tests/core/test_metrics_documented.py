"""docs/metrics.md and a real scrape name the same metrics, types and labels."""

import pytest

from jobs.size_class import size_class_name, task_size_class
from tests.core.scraping import documented, families
from tests.jobs.conftest import CREDITS, fund, online_node, submit_job


def test_the_documented_table_is_read():
    rows = documented()
    assert len(rows) >= 30
    assert rows["computepool_tasks"] == ("gauge", {"state", "size_class"})
    assert rows["computepool_claim_seconds"] == ("histogram", set())


@pytest.mark.django_db
def test_every_exposed_metric_is_documented_and_every_documented_one_is_exposed(client, alice, bob):
    # Something in every database gauge, so their samples carry their labels.
    fund(alice, 10_000 * CREDITS)
    online_node(bob)
    submit_job(alice.pk, 2)
    exposed = families(client.get("/metrics").content.decode())
    docs = documented()
    assert set(exposed) == set(docs), set(exposed) ^ set(docs)
    for name, (kind, labels) in exposed.items():
        assert kind == docs[name][0], name
        # A family with samples carries exactly its documented labels.
        assert not labels or labels == docs[name][1], (name, labels, docs[name][1])


def test_size_classes_read_as_people_read_them():
    assert size_class_name(task_size_class(1, 256, 0)) == "cpu-1c-512m"
    assert size_class_name(task_size_class(3, 9000, 0)) == "cpu-4c-16g"
    assert size_class_name(task_size_class(8, 8192, 1)) == "gpu-8c-8g"
