"""Deliberately broken variants that each verification layer must catch."""
