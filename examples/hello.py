# A sample run for the demo: what an agent might write to answer "what does my basket cost?".
basket = {"apples": (3, 0.5), "bread": (1, 2.25), "coffee": (2, 7.0)}
total = sum(count * price for count, price in basket.values())
print(f"{len(basket)} items, total {total:.2f}")
with open("receipt.txt", "w") as f:
    for name, (count, price) in sorted(basket.items()):
        f.write(f"{name:8} {count} x {price:5.2f}\n")
