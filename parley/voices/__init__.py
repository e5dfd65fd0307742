"""Voices: the catalogue files, the clone registry's in-memory book, engine rosters."""
