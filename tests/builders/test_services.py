"""The database's headless Service and the server's Service."""

from attested_cortex.builders.services import build_db_service, build_server_service, endpoint
from attested_cortex.builders.statefulsets import build_statefulset
from tests.builders.specs import CORTEX, DEFAULTS, NAMESPACE, assert_child_metadata, cortex


def test_db_service_is_headless_and_selects_the_database_pod() -> None:
    svc = build_db_service(cortex())
    assert_child_metadata(svc, name=f"{CORTEX}-db", component="database")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["ports"] == [{"name": "postgres", "port": 5432,
                                     "targetPort": "postgres", "protocol": "TCP"}]
    pod_labels = build_statefulset(cortex(), DEFAULTS)["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()


def test_db_service_is_the_statefulset_governing_service() -> None:
    sts = build_statefulset(cortex(), DEFAULTS)
    assert sts["spec"]["serviceName"] == build_db_service(cortex())["metadata"]["name"]


def test_server_service_defaults() -> None:
    svc = build_server_service(cortex())
    assert_child_metadata(svc, name=CORTEX, component="server")
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["selector"] == {"app.kubernetes.io/name": "attested-cortex",
                                       "app.kubernetes.io/instance": CORTEX,
                                       "app.kubernetes.io/component": "server"}
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": "http",
                                     "protocol": "TCP"}]


def test_server_service_type_and_port_from_spec() -> None:
    c = cortex({"server": {"service": {"type": "LoadBalancer", "port": 443}}})
    svc = build_server_service(c)
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["ports"][0]["port"] == 443
    assert svc["spec"]["ports"][0]["targetPort"] == "http"
    assert endpoint(c) == f"http://{CORTEX}.{NAMESPACE}.svc:443"


def test_endpoint_default() -> None:
    assert endpoint(cortex()) == f"http://{CORTEX}.{NAMESPACE}.svc:8080"
