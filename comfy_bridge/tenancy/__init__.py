"""Multi-tenant hosted service: tenants and API keys, authentication, per-tenant isolation of
queue, history, files and messages, a durable store, and quotas. See server.TenantPromptServer."""
