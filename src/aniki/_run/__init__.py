"""The run machinery behind ``Runner``: the turn loop, tools, streaming and persistence."""
