# A sample run for the demo: what an agent might write to answer "how did the shop do this year?".
import matplotlib.pyplot as plt
import pandas as pd

sales = pd.DataFrame({
    "month": ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"],
    "revenue": [12.5, 14.0, 13.2, 16.1, 18.4, 21.0, 22.3, 20.8, 19.5, 17.2, 23.9, 29.4],
    "costs": [10.1, 10.8, 11.0, 12.2, 13.1, 14.5, 15.0, 14.7, 14.1, 13.3, 16.0, 18.2],
})
sales["profit"] = sales["revenue"] - sales["costs"]
print(sales.describe().round(2))

fig, ax = plt.subplots(figsize=(8, 4.5))
for column in ("revenue", "costs", "profit"):
    ax.plot(sales["month"], sales[column], marker="o", label=column)
ax.set_title("Shop figures by month")
ax.set_xlabel("month")
ax.set_ylabel("thousand euros")
ax.legend()
plt.show()
