import pytest
from django.db import IntegrityError, transaction

from nodes.capabilities import normalise, parse_compute_capability
from nodes.models import Node
from nodes.tiers import TierTable
from tests.nodes.conftest import capabilities, gpu


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8.9", 89),
        ("7.0", 70),
        ("6.1", 61),
        ("12.0", 120),
        (" 8.6 ", 86),
        (None, None),
        ("", None),
        ("eight", None),
        ("8", None),
        ("8.9.1", None),
    ],
)
def test_it_reads_compute_capability_as_an_integer(text, value):
    assert parse_compute_capability(text) == value


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("cc", "fp16_ok"), [("8.9", True), ("7.0", True), ("6.1", False), (None, False)]
)
def test_it_allows_fp16_from_compute_capability_seven(cc, fp16_ok):
    caps = normalise(capabilities(gpus=[gpu(compute_capability=cc)]), TierTable.load())
    assert caps.fp16_ok is fp16_ok


@pytest.mark.django_db
def test_it_normalises_the_contract_example():
    caps = normalise(capabilities(), TierTable.load())
    assert caps.fields() | {"capabilities": None} == {
        "tier": "rtx-4090",
        "gpu_count": 1,
        "gpu_name": "NVIDIA GeForce RTX 4090",
        "gpu_vendor": "nvidia",
        "gpu_vram_mb": 24564,
        "compute_capability": 89,
        "driver_version": "550.54.14",
        "fp16_ok": True,
        "cpu_cores": 32,
        "ram_mb": 64000,
        "disk_mb": 500000,
        "avx2": True,
        "avx512": True,
        "sandboxes": ["docker", "gvisor", "bwrap"],
        "agent_version": "0.1.0",
        "capabilities": None,
    }


@pytest.mark.django_db
def test_it_keeps_unknown_values_unknown():
    caps = normalise(
        {"gpus": [gpu(vram_total_mb=None, compute_capability=None)], "cpu": None, "ram_mb": None},
        TierTable.load(),
    )
    assert (
        caps.gpu_vram_mb,
        caps.compute_capability,
        caps.cpu_cores,
        caps.ram_mb,
        caps.disk_mb,
    ) == (None, None, None, None, None)


def _register(client, **body):
    payload = {"name": "rig-1", "region": "IN", "capabilities": capabilities()} | body
    return client.post("/api/v1/nodes/", payload, format="json")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {"capabilities": capabilities(gpus=[gpu(index=i) for i in range(17)])},
            "capabilities.gpus",
        ),
        (
            {"capabilities": capabilities(gpus=[gpu(vram_total_mb=-1)])},
            "capabilities.gpus.0.vram_total_mb",
        ),
        (
            {"capabilities": capabilities(gpus=[gpu(compute_capability="eight")])},
            "capabilities.gpus.0.compute_capability",
        ),
        ({"capabilities": capabilities(gpus=[gpu(name="x" * 201)])}, "capabilities.gpus.0.name"),
        ({"capabilities": capabilities(ram_mb="lots")}, "capabilities.ram_mb"),
        ({"capabilities": capabilities(sandboxes=["docker"] * 9)}, "capabilities.sandboxes"),
        (
            {"capabilities": capabilities(detection={"notes": ["n"] * 51})},
            "capabilities.detection.notes",
        ),
        ({"capabilities": "a lot"}, "capabilities"),
        ({"capabilities": None}, "capabilities"),
        ({"region": "IND"}, "region"),
        ({"region": "I1"}, "region"),
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "rig\x00one"}, "name"),
    ],
)
def test_it_refuses_bad_input_naming_the_field_and_writes_nothing(api, bob, body, field):
    response = _register(api(bob, "operator"), **body)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid"
    assert any(name.startswith(field) for name in response.json()["fields"]), response.json()
    assert not Node.objects.exists()


@pytest.mark.django_db
def test_it_drops_unknown_keys_and_keeps_known_ones(api, bob):
    caps = capabilities(secret="x" * 10_000, gpus=[gpu() | {"extra": 1}])
    response = _register(api(bob, "operator"), capabilities=caps)
    assert response.status_code == 201, response.content
    stored = Node.objects.get().capabilities
    assert "secret" not in stored and "extra" not in stored["gpus"][0]
    assert stored["gpus"][0]["name"] == "NVIDIA GeForce RTX 4090"
    assert stored["cpu"]["logical_cores"] == 32


@pytest.mark.django_db
@pytest.mark.parametrize(("region", "stored"), [("in", "IN"), ("", ""), (None, "")])
def test_it_stores_the_region_as_an_upper_case_country_code_or_blank(api, bob, region, stored):
    response = _register(api(bob, "operator"), region=region)
    assert response.status_code == 201, response.content
    assert Node.objects.get().region == stored


@pytest.mark.django_db
@pytest.mark.parametrize("region", ["xx", "XX", "zz", "UK", "EU", "IND", 7])
def test_it_refuses_a_region_that_is_not_a_country(api, bob, region):
    response = _register(api(bob, "operator"), region=region)
    assert response.status_code == 400, response.content
    assert "ISO 3166-1 alpha-2" in response.json()["fields"]["region"][0]
    assert not Node.objects.exists()


@pytest.mark.django_db
def test_the_database_refuses_a_region_of_another_shape(bobs_node):
    node, _ = bobs_node
    with pytest.raises(IntegrityError, match="node_region_code"), transaction.atomic():
        Node.objects.filter(pk=node.pk).update(region="in")
