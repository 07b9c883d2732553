"""`python -m node.pipeline`: run the pipeline with its configuration from the environment."""

import os

from node.pipeline.config import PipelineConfig
from node.pipeline.run import run_pipeline

if __name__ == "__main__":
    run_pipeline(PipelineConfig.from_env(os.environ))
