"""Hand-written backends: the behaviour of a vendor's backend over its generated bindings.  The generated
``ironaccelerator.backends.<vendor>._backend`` module holds its spec's tables (``specs/<vendor>/backend.yaml``)
and subclasses the backend here with them."""
