"""A well-behaved scripted MCP server (see scripted_lib for its options and tools)."""

from scripted_lib import main

if __name__ == "__main__":
    main()
