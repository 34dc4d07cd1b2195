"""Evidence about graders: calibration records of model graders and the human review queue.

The modules listed in `__all__` are this package's face: other packages import only those
(tests/contract/test_services_map.py).
"""

__all__ = ["calibration", "review"]
