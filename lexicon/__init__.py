"""Text pipeline and the rationale lexicon built from developer test cases."""
