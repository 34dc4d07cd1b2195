"""evalops: an eval-asset lifecycle manager for AI-agent evaluations."""

__version__ = "0.1.0"
