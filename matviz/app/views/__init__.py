"""The five linked views: block grid, SM lanes, tiles, banks, throughput."""
