"""Model access: every call goes through litellm (hosted providers, the embedded model, test fakes)."""

import os

# litellm fetches a price list over the network when imported unless this is set; we are offline-first.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
