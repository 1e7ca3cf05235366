"""End-to-end tests against a real etcd + kube-apiserver (see tests/e2e/apiserver.py)."""
