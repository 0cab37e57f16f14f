# install rules: filled in with the library target
