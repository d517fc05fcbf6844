"""Tests of the custom resource models, their rendered CRDs and admission."""
