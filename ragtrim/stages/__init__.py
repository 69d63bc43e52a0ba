"""Pipeline stages. Each module holds one stage family; ``base`` holds the contract and the registry."""
