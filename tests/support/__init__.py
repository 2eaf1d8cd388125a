"""Helpers shared by the tests: servers, leak checks, recorders and schema checks."""
