"""Writes questions.jsonl: the table questions and their known answers, each answer computed by the hand-written
reference SQL over the CSV/TSV files of sample_corpus/tables (run: .venv/bin/python
sample_corpus/tables/_questions/make.py). A folder starting with '_' is not ingested with the tables.
Written before the offline SQL translator existed; the bench (bench/tables.py) scores the product against it."""
import json
from pathlib import Path

import duckdb

HERE = Path(__file__).parent  # the question files
TABLES = HERE.parent  # the tables
# (route, form, question, reference SQL or None). route: table | mixed | text. form: what the question asks.
Q = [
    # -- single-table aggregates ------------------------------------------------------------------------------
    ("table", "count", "How many error codes are there in total?", "SELECT count(*) FROM error_codes"),
    ("table", "count", "How many error codes does the product have in total?", "SELECT count(*) FROM error_codes"),
    ("table", "count", "How many clients do we have?", "SELECT count(*) FROM clients"),
    ("table", "count", "Number of products in the catalogue table?", "SELECT count(*) FROM products"),
    ("table", "count", "How many Meridian error codes are there?",
     "SELECT count(*) FROM error_codes WHERE platform = 'Meridian'"),
    ("table", "count", "How many critical error codes are listed?",
     "SELECT count(*) FROM error_codes WHERE severity = 'critical'"),
    ("table", "count", "How many clients are rated amber?", "SELECT count(*) FROM clients WHERE health = 'amber'"),
    ("table", "count", "How many clients does Rafael Quintero manage?",
     "SELECT count(*) FROM clients WHERE account_manager = 'Rafael Quintero'"),
    ("table", "count", "How many clients are based in the Netherlands?",
     "SELECT count(*) FROM clients WHERE country = 'Netherlands'"),
    ("table", "count", "Count the FieldOS error codes with minor severity.",
     "SELECT count(*) FROM error_codes WHERE platform = 'FieldOS' AND severity = 'minor'"),
    ("table", "sum", "What is the total revenue across all clients?", "SELECT sum(revenue_keur) FROM revenue"),
    ("table", "sum", "What was the total revenue in 2024-Q3?",
     "SELECT sum(revenue_keur) FROM revenue WHERE quarter = '2024-Q3'"),
    ("table", "sum", "Total software revenue?", "SELECT sum(revenue_keur) FROM revenue WHERE product_line = 'software'"),
    ("table", "sum", "What is the total revenue of Baltimar Shipping?",
     "SELECT sum(revenue_keur) FROM revenue WHERE client = 'Baltimar Shipping'"),
    ("table", "sum", "Sum of hardware revenue for Kestrel Water Authority in 2024-Q2?",
     "SELECT sum(revenue_keur) FROM revenue WHERE client = 'Kestrel Water Authority' AND quarter = '2024-Q2' "
     "AND product_line = 'hardware'"),
    ("table", "sum", "How many support tickets were filed for error codes in 2024 altogether?",
     "SELECT sum(tickets_2024) FROM error_codes"),
    ("table", "sum", "Total tickets in 2024 for Tidewater error codes?",
     "SELECT sum(tickets_2024) FROM error_codes WHERE platform = 'Tidewater'"),
    ("table", "sum", "How many units were shipped in 2024 across all products?",
     "SELECT sum(units_shipped_2024) FROM products"),
    ("table", "sum", "Total units shipped in 2024 of sensor products?",
     "SELECT sum(units_shipped_2024) FROM products WHERE family = 'sensor'"),
    ("table", "avg", "What is the average number of tickets per error code in 2024?",
     "SELECT avg(tickets_2024) FROM error_codes"),
    ("table", "avg", "Average revenue per row for software?",
     "SELECT avg(revenue_keur) FROM revenue WHERE product_line = 'software'"),
    ("table", "avg", "What is the mean revenue_keur of Greyling Pharmaceuticals?",
     "SELECT avg(revenue_keur) FROM revenue WHERE client = 'Greyling Pharmaceuticals'"),
    ("table", "avg", "Average units shipped in 2024 per gateway model?",
     "SELECT avg(units_shipped_2024) FROM products WHERE family = 'gateway'"),
    ("table", "max", "What is the highest number of tickets any error code had in 2024?",
     "SELECT max(tickets_2024) FROM error_codes"),
    ("table", "max", "What is the maximum operating temperature of any product?", "SELECT max(max_temp_c) FROM products"),
    ("table", "max", "Largest single revenue figure in 2024-Q1?",
     "SELECT max(revenue_keur) FROM revenue WHERE quarter = '2024-Q1'"),
    ("table", "min", "What is the lowest minimum temperature among the products?", "SELECT min(min_temp_c) FROM products"),
    ("table", "min", "What is the smallest number of tickets for a critical error code?",
     "SELECT min(tickets_2024) FROM error_codes WHERE severity = 'critical'"),
    ("table", "min", "Earliest customer_since year among the clients?", "SELECT min(customer_since) FROM clients"),
    # -- grouped -----------------------------------------------------------------------------------------------
    ("table", "group", "How many error codes are there per platform?",
     "SELECT platform, count(*) FROM error_codes GROUP BY platform"),
    ("table", "group", "Total revenue by quarter?", "SELECT quarter, sum(revenue_keur) FROM revenue GROUP BY quarter"),
    ("table", "group", "Total revenue per product line?",
     "SELECT product_line, sum(revenue_keur) FROM revenue GROUP BY product_line"),
    ("table", "group", "Number of tickets in 2024 by severity?",
     "SELECT severity, sum(tickets_2024) FROM error_codes GROUP BY severity"),
    ("table", "group", "How many clients per account manager?",
     "SELECT account_manager, count(*) FROM clients GROUP BY account_manager"),
    ("table", "group", "Average tickets per platform?",
     "SELECT platform, avg(tickets_2024) FROM error_codes GROUP BY platform"),
    ("table", "group", "Count of clients by country?", "SELECT country, count(*) FROM clients GROUP BY country"),
    ("table", "group", "What is the total 2024-Q2 revenue for each client?",
     "SELECT client, sum(revenue_keur) FROM revenue WHERE quarter = '2024-Q2' GROUP BY client"),
    # -- top-k and filters (lists) ------------------------------------------------------------------------------
    ("table", "topk", "Which 3 error codes had the most tickets in 2024?",
     "SELECT code FROM error_codes ORDER BY tickets_2024 DESC LIMIT 3"),
    ("table", "topk", "Which error code has the most tickets?",
     "SELECT code FROM error_codes ORDER BY tickets_2024 DESC LIMIT 1"),
    ("table", "topk", "Top 2 products by units shipped in 2024?",
     "SELECT sku FROM products ORDER BY units_shipped_2024 DESC LIMIT 2"),
    ("table", "topk", "Which client had the highest total revenue?",
     "SELECT client FROM revenue GROUP BY client ORDER BY sum(revenue_keur) DESC LIMIT 1"),
    ("table", "topk", "Top 3 clients by total revenue?",
     "SELECT client FROM revenue GROUP BY client ORDER BY sum(revenue_keur) DESC LIMIT 3"),
    ("table", "topk", "Which product has the lowest units shipped in 2024?",
     "SELECT sku FROM products ORDER BY units_shipped_2024 ASC LIMIT 1"),
    ("table", "filter", "Which error codes are critical?", "SELECT code FROM error_codes WHERE severity = 'critical'"),
    ("table", "filter", "List the clients rated amber.", "SELECT client FROM clients WHERE health = 'amber'"),
    ("table", "filter", "Which clients are managed by Lena Brightwater?",
     "SELECT client FROM clients WHERE account_manager = 'Lena Brightwater'"),
    ("table", "filter", "Which FieldOS error codes are major?",
     "SELECT code FROM error_codes WHERE platform = 'FieldOS' AND severity = 'major'"),
    # -- joins ---------------------------------------------------------------------------------------------------
    ("table", "join", "What is the total revenue of Nordhaven Ports Authority's subsidiaries?",
     "SELECT sum(r.revenue_keur) FROM revenue r JOIN clients c ON c.client = r.client "
     "WHERE c.parent = 'Nordhaven Ports Authority'"),
    ("table", "join", "Total revenue of clients managed by Rafael Quintero?",
     "SELECT sum(r.revenue_keur) FROM revenue r JOIN clients c ON c.client = r.client "
     "WHERE c.account_manager = 'Rafael Quintero'"),
    ("table", "join", "What is the total revenue from clients rated amber?",
     "SELECT sum(r.revenue_keur) FROM revenue r JOIN clients c ON c.client = r.client WHERE c.health = 'amber'"),
    ("table", "join", "Total revenue per country?",
     "SELECT c.country, sum(r.revenue_keur) FROM revenue r JOIN clients c ON c.client = r.client GROUP BY c.country"),
    ("table", "join", "Which account manager's clients brought the most revenue?",
     "SELECT c.account_manager FROM revenue r JOIN clients c ON c.client = r.client GROUP BY c.account_manager "
     "ORDER BY sum(r.revenue_keur) DESC LIMIT 1"),
    ("table", "join", "Total 2024-Q3 software revenue of Baltimar Shipping and its subsidiaries?",
     "SELECT sum(r.revenue_keur) FROM revenue r JOIN clients c ON c.client = r.client WHERE (c.parent = "
     "'Baltimar Shipping' OR c.client = 'Baltimar Shipping') AND r.quarter = '2024-Q3' AND r.product_line = 'software'"),
    # -- mixed: a table aggregate and a passage of the documents --------------------------------------------------
    ("mixed", "mixed", "What is the first action for the error code with the most tickets in 2024?",
     "SELECT code FROM error_codes ORDER BY tickets_2024 DESC LIMIT 1"),
    ("mixed", "mixed", "Which products does the client with the highest total revenue use, according to the register?",
     "SELECT client FROM revenue GROUP BY client ORDER BY sum(revenue_keur) DESC LIMIT 1"),
    ("mixed", "mixed", "Explain what the most frequently reported FieldOS error means and how to fix it.",
     "SELECT code FROM error_codes WHERE platform = 'FieldOS' ORDER BY tickets_2024 DESC LIMIT 1"),
    ("mixed", "mixed", "Why is the client with the lowest total revenue rated amber?",
     "SELECT client FROM revenue GROUP BY client ORDER BY sum(revenue_keur) ASC LIMIT 1"),
    ("mixed", "mixed", "Describe the project of the client that had the highest 2024-Q3 revenue.",
     "SELECT client FROM revenue WHERE quarter = '2024-Q3' GROUP BY client ORDER BY sum(revenue_keur) DESC LIMIT 1"),
    ("mixed", "mixed", "What temperature range does the product with the most units shipped cover, and where is it "
                       "deployed?", "SELECT sku FROM products ORDER BY units_shipped_2024 DESC LIMIT 1"),
    ("mixed", "mixed", "How many critical error codes are there, and what should support do first for each?",
     "SELECT count(*) FROM error_codes WHERE severity = 'critical'"),
    ("mixed", "mixed", "What happened in the incident behind the Tidewater error with the most tickets?",
     "SELECT code FROM error_codes WHERE platform = 'Tidewater' ORDER BY tickets_2024 DESC LIMIT 1"),
    # -- text: the documents alone --------------------------------------------------------------------------------
    ("text", "text", "What does error E-TDW-3150 mean and what is the first action?", None),
    ("text", "text", "Who is the account manager for Kestrel Water Authority and where does she or he travel?", None),
    ("text", "text", "What replaced Tidewater at Nordhaven Ports Authority?", None),
    ("text", "text", "What is Project Bluefin?", None),
    ("text", "text", "Why were Q1 2024 hardware deliveries weak?", None),
    ("text", "text", "What modem does the FB-520 use?", None),
    ("text", "text", "How many days a week may staff work remotely under the final policy?", None),
    ("text", "text", "What is the recommended first action when the database connection pool is exhausted?", None),
    ("text", "text", "Summarise the security hardening plan.", None),
    ("text", "text", "What did the board decide in September 2024?", None),
    ("text", "text", "How do I migrate from Tidewater to Meridian?", None),
    ("text", "text", "What is the annual recurring revenue at the end of Q1 2024?", None),
]

# Written after the translator was tuned on Q, and never used to tune it: the bench reports it as its own split.
HOLDOUT = [
    ("table", "count", "How many products are sensors?", "SELECT count(*) FROM products WHERE family = 'sensor'"),
    ("table", "count", "What's the number of major error codes?",
     "SELECT count(*) FROM error_codes WHERE severity = 'major'"),
    ("table", "count", "How many clients are in Poland?", "SELECT count(*) FROM clients WHERE country = 'Poland'"),
    ("table", "count", "How many rows does the revenue table have for 2024-Q1?",
     "SELECT count(*) FROM revenue WHERE quarter = '2024-Q1'"),
    ("table", "sum", "What did Ural-Steppe Agro bring in, in total revenue?",
     "SELECT sum(revenue_keur) FROM revenue WHERE client = 'Ural-Steppe Agro'"),
    ("table", "sum", "Total hardware revenue in 2024-Q1?",
     "SELECT sum(revenue_keur) FROM revenue WHERE product_line = 'hardware' AND quarter = '2024-Q1'"),
    ("table", "sum", "Sum of tickets for the FieldOS platform in 2024?",
     "SELECT sum(tickets_2024) FROM error_codes WHERE platform = 'FieldOS'"),
    ("table", "avg", "On average, how many tickets did a Meridian error code get in 2024?",
     "SELECT avg(tickets_2024) FROM error_codes WHERE platform = 'Meridian'"),
    ("table", "avg", "Average revenue for 2024-Q2?", "SELECT avg(revenue_keur) FROM revenue WHERE quarter = '2024-Q2'"),
    ("table", "max", "What was the biggest revenue figure for Greyling Biologics?",
     "SELECT max(revenue_keur) FROM revenue WHERE client = 'Greyling Biologics'"),
    ("table", "min", "What is the fewest tickets any minor error code got in 2024?",
     "SELECT min(tickets_2024) FROM error_codes WHERE severity = 'minor'"),
    ("table", "max", "Highest maximum temperature of the gateway products?",
     "SELECT max(max_temp_c) FROM products WHERE family = 'gateway'"),
    ("table", "group", "Revenue for each quarter for Kestrel Water Authority?",
     "SELECT quarter, sum(revenue_keur) FROM revenue WHERE client = 'Kestrel Water Authority' GROUP BY quarter"),
    ("table", "group", "How many error codes per severity?",
     "SELECT severity, count(*) FROM error_codes GROUP BY severity"),
    ("table", "group", "Units shipped in 2024 by product family?",
     "SELECT family, sum(units_shipped_2024) FROM products GROUP BY family"),
    ("table", "group", "Clients per health rating?", "SELECT health, count(*) FROM clients GROUP BY health"),
    ("table", "topk", "Which two Tidewater error codes had the most tickets?",
     "SELECT code FROM error_codes WHERE platform = 'Tidewater' ORDER BY tickets_2024 DESC LIMIT 2"),
    ("table", "topk", "Which client had the lowest total software revenue?",
     "SELECT client FROM revenue WHERE product_line = 'software' GROUP BY client ORDER BY sum(revenue_keur) ASC "
     "LIMIT 1"),
    ("table", "filter", "Which clients are in Belgium?", "SELECT client FROM clients WHERE country = 'Belgium'"),
    ("table", "filter", "List the Meridian error codes.", "SELECT code FROM error_codes WHERE platform = 'Meridian'"),
    ("table", "join", "What is the total revenue of clients in Poland?",
     "SELECT sum(r.revenue_keur) FROM revenue r JOIN clients c ON c.client = r.client WHERE c.country = 'Poland'"),
    ("table", "join", "How much revenue came from Lena Brightwater's accounts in 2024-Q3?",
     "SELECT sum(r.revenue_keur) FROM revenue r JOIN clients c ON c.client = r.client WHERE "
     "c.account_manager = 'Lena Brightwater' AND r.quarter = '2024-Q3'"),
    ("mixed", "mixed", "What is the recommended fix for the critical error code with the most tickets?",
     "SELECT code FROM error_codes WHERE severity = 'critical' ORDER BY tickets_2024 DESC LIMIT 1"),
    ("mixed", "mixed", "Why is the product with the fewest units shipped used on containers, and what modem does it "
                       "have?", "SELECT sku FROM products ORDER BY units_shipped_2024 ASC LIMIT 1"),
    ("text", "text", "Which office maintains the strategic client register?", None),
    ("text", "text", "What is the TLS requirement for gateways older than FieldOS 3.9.0?", None),
    ("text", "text", "When is the Meridian migration scheduled for Greyling?", None),
    ("text", "text", "How many employees did Corvane have at the end of Q1 2024?", None),
]

# Written after the translator was changed on HOLDOUT's failures (so HOLDOUT is no longer held out: its first run,
# 80.0% answered correctly on the claimed forms, is in the bench's notes), never used to tune it.
HOLDOUT2 = [
    ("table", "count", "How many gateways are in the product table?",
     "SELECT count(*) FROM products WHERE family = 'gateway'"),
    ("table", "count", "Number of Tidewater error codes?", "SELECT count(*) FROM error_codes WHERE platform = 'Tidewater'"),
    ("table", "count", "How many clients have a green health rating?",
     "SELECT count(*) FROM clients WHERE health = 'green'"),
    ("table", "count", "How many error codes are critical on FieldOS?",
     "SELECT count(*) FROM error_codes WHERE severity = 'critical' AND platform = 'FieldOS'"),
    ("table", "sum", "Total revenue for Nordhaven Terminal South?",
     "SELECT sum(revenue_keur) FROM revenue WHERE client = 'Nordhaven Terminal South'"),
    ("table", "sum", "How much software revenue did we book in 2024-Q1?",
     "SELECT sum(revenue_keur) FROM revenue WHERE product_line = 'software' AND quarter = '2024-Q1'"),
    ("table", "sum", "What is the total number of tickets for critical errors?",
     "SELECT sum(tickets_2024) FROM error_codes WHERE severity = 'critical'"),
    ("table", "sum", "How many units of gateways were shipped in 2024 in total?",
     "SELECT sum(units_shipped_2024) FROM products WHERE family = 'gateway'"),
    ("table", "avg", "What is the average revenue of Baltimar Reefer Services?",
     "SELECT avg(revenue_keur) FROM revenue WHERE client = 'Baltimar Reefer Services'"),
    ("table", "avg", "Average tickets for major error codes?",
     "SELECT avg(tickets_2024) FROM error_codes WHERE severity = 'major'"),
    ("table", "max", "What is the most tickets a Meridian error code received?",
     "SELECT max(tickets_2024) FROM error_codes WHERE platform = 'Meridian'"),
    ("table", "min", "Lowest revenue figure for hardware?",
     "SELECT min(revenue_keur) FROM revenue WHERE product_line = 'hardware'"),
    ("table", "min", "What's the minimum units shipped in 2024 for a sensor?",
     "SELECT min(units_shipped_2024) FROM products WHERE family = 'sensor'"),
    ("table", "group", "Software revenue per quarter?",
     "SELECT quarter, sum(revenue_keur) FROM revenue WHERE product_line = 'software' GROUP BY quarter"),
    ("table", "group", "Total tickets per platform in 2024?",
     "SELECT platform, sum(tickets_2024) FROM error_codes GROUP BY platform"),
    ("table", "group", "How many clients per country are rated green?",
     "SELECT country, count(*) FROM clients WHERE health = 'green' GROUP BY country"),
    ("table", "topk", "Top 3 error codes by tickets?", "SELECT code FROM error_codes ORDER BY tickets_2024 DESC LIMIT 3"),
    ("table", "topk", "Which product shipped the most units in 2024?",
     "SELECT sku FROM products ORDER BY units_shipped_2024 DESC LIMIT 1"),
    ("table", "topk", "Which client had the highest hardware revenue in 2024-Q2?",
     "SELECT client FROM revenue WHERE product_line = 'hardware' AND quarter = '2024-Q2' GROUP BY client "
     "ORDER BY sum(revenue_keur) DESC LIMIT 1"),
    ("table", "filter", "Which error codes are minor on Meridian?",
     "SELECT code FROM error_codes WHERE severity = 'minor' AND platform = 'Meridian'"),
    ("table", "filter", "List the clients managed by Aigerim Sadykova.",
     "SELECT client FROM clients WHERE account_manager = 'Aigerim Sadykova'"),
    ("table", "join", "What is the total revenue of green-rated clients in 2024-Q1?",
     "SELECT sum(r.revenue_keur) FROM revenue r JOIN clients c ON c.client = r.client WHERE c.health = 'green' "
     "AND r.quarter = '2024-Q1'"),
    ("table", "join", "Revenue of Greyling Pharmaceuticals' subsidiaries?",
     "SELECT sum(r.revenue_keur) FROM revenue r JOIN clients c ON c.client = r.client "
     "WHERE c.parent = 'Greyling Pharmaceuticals'"),
    ("mixed", "mixed", "How many Meridian error codes are there, and what does the retry budget error mean?",
     "SELECT count(*) FROM error_codes WHERE platform = 'Meridian'"),
    ("mixed", "mixed", "Describe the deployment of the client with the most 2024-Q1 hardware revenue.",
     "SELECT client FROM revenue WHERE product_line = 'hardware' AND quarter = '2024-Q1' GROUP BY client "
     "ORDER BY sum(revenue_keur) DESC LIMIT 1"),
    ("text", "text", "What is the expense limit for hotel stays in the travel policy?", None),
    ("text", "text", "Who signed contract BSH-2024-002 and when?", None),
    ("text", "text", "What causes E-FOS-0733 and how do I fix it?", None),
    ("text", "text", "Which sensors does Kestrel Water Authority use?", None),
]


def _value(v):
    if isinstance(v, float):
        return round(v, 4)
    return v


def main() -> None:
    con = duckdb.connect()
    for f in sorted(TABLES.iterdir()):
        if f.suffix in (".csv", ".tsv"):
            con.execute(f"CREATE TABLE {f.stem} AS SELECT * FROM read_csv('{f}', header=true)")
    _write(con, Q, "questions.jsonl", "t", lambda i: "test" if i % 3 == 0 else "dev")
    _write(con, HOLDOUT, "questions_holdout.jsonl", "h", lambda i: "holdout")
    _write(con, HOLDOUT2, "questions_holdout2.jsonl", "g", lambda i: "holdout2")


def _write(con, items, filename, prefix, split) -> None:
    out = []
    for i, (route, form, question, sql) in enumerate(items, start=1):
        answer = None
        if sql:
            rows = con.execute(sql).fetchall()
            if len(rows) == 1 and len(rows[0]) == 1:
                answer = _value(rows[0][0])
            elif rows and len(rows[0]) == 1:
                answer = [_value(r[0]) for r in rows]
            else:
                answer = {str(r[0]): _value(r[1]) for r in sorted(rows, key=lambda r: str(r[0]))}
        out.append({"id": f"{prefix}{i:02d}", "split": split(i), "route": route, "form": form,
                    "question": question, "sql": sql, "answer": answer})
    (HERE / filename).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out))
    print(f"{filename}: {len(out)} questions written")


if __name__ == "__main__":
    main()
