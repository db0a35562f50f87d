"""Repository repair (the SWE-Gym kind): bugs injected into pinned real projects, judged by their own tests."""
