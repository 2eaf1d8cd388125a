"""The MCP actors, on ``snodo.supervision``: one ``SubscriptionStream`` per subscription."""

__all__: list[str] = []
