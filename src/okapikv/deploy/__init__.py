"""Container deployments: `okapi deploy compose` and `okapi deploy k8s` (docs/deploy.md).

Both are rendered from one model (``okapikv.deploy.model``): the same servers, names, ports,
volumes, environment and health check, so a compose file and Kubernetes manifests generated from
the same parameters describe the same cluster by construction. The Grafana dashboard and the
Prometheus alert rules they provision live in ``monitoring/``.
"""
