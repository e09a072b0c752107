//! raidcore: the sans-I/O planner (being written).
