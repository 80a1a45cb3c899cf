"""Subcommands that live outside cli.py (imported only when invoked)."""
