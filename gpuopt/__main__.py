"""`python -m gpuopt ...`: the same CLI as the `gpuopt` script."""

from gpuopt.cli.main import main

main()
