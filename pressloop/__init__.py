"""Pressloop: run AI agents for WordPress sites."""
