"""A Model's status: the conditions, how much of it modelseal writes, and writing it."""
