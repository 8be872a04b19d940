print("tack demo")
