"""The MCP actors, on ``snodo.supervision``: one ``SubscriptionStream`` per subscription."""
