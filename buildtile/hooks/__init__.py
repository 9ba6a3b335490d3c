"""Build-tool integrations of buildtile.

- :mod:`buildtile.hooks.pep517`: what the PEP 517 backend :mod:`buildtile.build`
  does (it wraps scikit-build-core);
- :mod:`buildtile.hooks.setuptools`: the same kernels in a setuptools project's
  build, without changing its backend;
- :mod:`buildtile.hooks.staging`: compiling kernels into the folder a wheel is
  packed from;
- :mod:`buildtile.hooks.skbuild_settings`: the settings handed to scikit-build-core;
- :mod:`buildtile.hooks.boundary`: errors leave a build tool as one message.

Nothing is imported here, so a build tool that loads one integration does not
pay for the others.
"""
