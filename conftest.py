"""Root pytest configuration.

Building Matplotlib's font cache prints a notice on stderr the first time Matplotlib is imported
on a machine. Under strict nbval that notice would land in a notebook's output and fail the
comparison, so we build the cache here, in the pytest process, before any notebook kernel starts.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.font_manager
