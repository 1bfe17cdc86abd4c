"""Token Factory gateway: OpenAI-compatible front door with keys, tenants, rate limits and metering."""

__version__ = "0.1.0"
