"""Catalog store: tasks and developer test cases in SQL, with import/export."""
