"""Input the product does not trust, at the bottom of core: the one checked reader for every path a user names
(`files`) and a child Python process behind two pipes (`worker`), the parse and SQL sandboxes' shared protocol. Both
import nothing of core, so a sandbox child loads neither duckdb nor a model."""
