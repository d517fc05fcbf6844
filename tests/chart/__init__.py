"""Tests of the Helm chart: lint, render, install, upgrade and RBAC."""
