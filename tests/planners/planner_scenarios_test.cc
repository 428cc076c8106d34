// more scenarios
