"""Build the binary documents of the sample corpus (2 PDF + 2 DOCX).

Run from anywhere:  python sample_corpus/_make_binary_docs.py

PDFs are written by hand (no extra dependency): a minimal PDF 1.4 file with the
standard Type1 fonts Helvetica / Helvetica-Bold, one BT..ET text object per line
(Tj operator), and a correct xref table. PDF text is ASCII only.
DOCX files are written with python-docx using the Heading 1 / Heading 2 styles.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

# ---------------------------------------------------------------------------
# Document contents. Each document is a list of (kind, text) with kind in
# {"h1", "h2", "p", "li"}.
# ---------------------------------------------------------------------------

Q3_REPORT = [
    ("h1", "Corvane Systems - Quarterly Business Report, Q3 2024"),
    ("p", "Prepared by the Finance office for the management team and shareholders. "
          "Figures are unaudited and reported in euros (EUR)."),
    ("h2", "Summary"),
    ("p", "Corvane Systems closed the third quarter of 2024 with total revenue of EUR 34.0 million."),
    ("p", "The quarter was defined by strong software growth, continued shortages of 5G modules "
          "and the approval of the final remote work policy. The company ended the quarter with "
          "433 employees."),
    ("h2", "Industrial Hardware division"),
    ("p", "The Industrial Hardware division sells Fieldbox gateways, Vibra sensors and accessories."),
    ("p", "Revenue declined 1.1% compared with the previous quarter, to EUR 17.9 million."),
    ("p", "The decline is explained almost entirely by the FB-520, whose shipments were 62% below "
          "the original plan because modem deliveries again fell short of the confirmed allocation."),
    ("p", "Gross margin recovered to 37.2% as expedited freight was stopped and the memory price "
          "increase was partly passed on to customers."),
    ("p", "Shipments were 7,300 gateways and 12,100 sensors. FB-340 volumes reached a record, partly "
          "because some customers accepted it as an interim replacement for the FB-520."),
    ("h2", "Software division"),
    ("p", "The Software division sells Tidewater licences and support, Meridian subscriptions and "
          "related professional services."),
    ("p", "Revenue grew 7.3% over the previous quarter, to EUR 16.1 million."),
    ("p", "Annual recurring revenue reached EUR 59.8 million at the end of the quarter."),
    ("p", "Meridian 1.2 was released on 3 September and added tenant-level audit logs, which several "
          "regulated customers had requested before agreeing to migrate."),
    ("h2", "Platform migration"),
    ("p", "By 30 September, 23 of the 37 Tidewater customers were running on Meridian under Project "
          "Lantern."),
    ("p", "The remaining fourteen include a pharmaceutical customer that needs formal change control "
          "and three customers that depend on the Tidewater OPC UA server, which Meridian will only "
          "support from version 1.4. The programme target of completing all migrations by the end of "
          "the second quarter of 2025 is unchanged."),
    ("h2", "Supply chain"),
    ("p", "The quoted lead time for the Quellink QM-55 module remained at 38 weeks throughout the "
          "quarter."),
    ("p", "In September the board approved a EUR 2.4 million purchase of 3,000 modules through an "
          "authorised distributor, which secures FB-520 production for the delayed reefer container "
          "pilot in early 2025."),
    ("p", "Radio certification of the second-source Arvesto AM-5G2 module is expected in December. "
          "Shipments to Central Asia continued to suffer from congestion at the Khorgos border crossing."),
    ("h2", "Security"),
    ("p", "FieldOS 3.9.0, released on 10 September, made TLS 1.3 the default for all gateway "
          "connections."),
    ("p", "Hardware security keys have been issued to 96% of employees, and an external penetration "
          "test has been contracted for November."),
    ("h2", "People"),
    ("p", "Headcount grew by twelve. The final remote work policy takes effect on 1 October, and the "
          "board approved six additional field engineers for the Almaty office."),
    ("h2", "Outlook"),
    ("p", "Software growth is expected to continue as the remaining migrations are completed. Hardware "
          "revenue will stay below its potential until modem supply normalises. The board will review "
          "guidance for the fourth quarter at its October meeting."),
]

BOARD_MINUTES = [
    ("h1", "Corvane Systems B.V. - Minutes of the Board Meeting"),
    ("p", "Date: 19 September 2024. Place: Rotterdam head office, with remote participation."),
    ("p", "Board members present: Elisabeth Varga (independent chair), Ingrid Talvik, Marcus Oyelaran, "
          "Henrik Solberg, Amara Okafor."),
    ("p", "In attendance: Priya Anand, Joost van Leeuwen, Oskar Lindqvist, Helen Marsh. "
          "Secretary: Daan Verhoef."),
    ("h2", "1. Opening and minutes"),
    ("p", "The chair opened the meeting at 10:00. The minutes of the meeting of 20 June 2024 were "
          "approved without changes."),
    ("h2", "2. Preliminary third-quarter results"),
    ("p", "The CFO presented preliminary figures. Total revenue for the quarter is expected at about "
          "EUR 34 million, with software growing and hardware slightly down because of FB-520 "
          "shortages. The board noted that the gap between software and hardware revenue has "
          "narrowed to less than EUR 2 million per quarter."),
    ("h2", "3. Meridian and Project Lantern"),
    ("p", "Priya Anand presented the Meridian migration update on behalf of the engineering organisation."),
    ("p", "As of the meeting date, 21 of the 37 Tidewater customers had been migrated to Meridian."),
    ("p", "The main open risks are the missing OPC UA server feature and the validation requirements of "
          "a pharmaceutical customer. The board asked for a one-page migration dashboard to be included "
          "in the monthly management report from October onwards."),
    ("h2", "4. Supply chain"),
    ("p", "Joost van Leeuwen summarised the supplier risk memo of 12 August."),
    ("p", "The board approved the purchase of 3,000 QM-55 modules for about EUR 2.4 million."),
    ("p", "The board further asked management to adopt a dual-sourcing rule for all active components in "
          "new hardware designs from 2025 and to report supplier risk every quarter."),
    ("h2", "5. Security programme"),
    ("p", "Oskar Lindqvist reported that the bootloader weakness CRV-SEC-2024-011 has been closed on "
          "all gateways that receive automatic updates."),
    ("p", "The external penetration test by Falkmoor Security will take place in November at a cost of "
          "EUR 85,000."),
    ("p", "The board confirmed 31 December 2024 as the deadline for TLS 1.3 on all remaining Tidewater "
          "servers and asked to be informed of any customer that cannot meet it."),
    ("h2", "6. People matters"),
    ("p", "Helen Marsh presented the final remote work policy after the consultation period."),
    ("p", "The board approved the final remote work policy, which allows three remote days per week "
          "and takes effect on 1 October 2024."),
    ("p", "The board also approved the hiring of six additional field engineers for the Almaty office, "
          "to be funded from the expected growth of the Central Asian business."),
    ("h2", "7. Any other business and closing"),
    ("p", "No other business was raised. The next meeting will be held on 24 October 2024 in Gdansk, "
          "combined with a visit to the hardware test lab. The chair closed the meeting at 13:15."),
    ("h2", "Action items"),
    ("li", "Monthly migration dashboard in the management report - owner: VP Engineering - from October."),
    ("li", "Dual-sourcing rule for new hardware designs - owner: VP Operations - by December."),
    ("li", "List of customers at risk of missing the TLS deadline - owner: Head of Security - by "
           "24 October."),
    ("li", "Fourth-quarter guidance proposal - owner: CFO - for the October meeting."),
]

SECURITY_PLAN = [
    ("h1", "Security Hardening Plan 2024"),
    ("p", "Owner: Oskar Lindqvist, Head of Security. Version 1.0, approved by the executive team on "
          "14 May 2024."),
    ("h2", "Purpose"),
    ("p", "This plan describes how Corvane Systems will raise the security level of its products and "
          "internal systems during 2024. It responds to stricter audits by water utilities and "
          "pharmaceutical customers and to the findings of the inventory completed in the first quarter."),
    ("h2", "Scope"),
    ("p", "The plan covers FieldOS on all Fieldbox gateways, Tidewater 4.9 installations at customer "
          "sites, the Meridian managed service and the internal IT systems used by employees in all "
          "four offices."),
    ("h2", "Workstream 1: TLS modernisation"),
    ("p", "All Tidewater servers must have TLS_VERSION_MIN set to 1.3 by 31 December 2024."),
    ("p", "Meridian accepts only TLS 1.3 from its first release, so the work concentrates on Tidewater "
          "installations that are not yet migrated and on gateways with older firmware."),
    ("p", "The FieldOS release planned for September will make TLS 1.3 the default for outgoing "
          "connections. Customers whose gateways cannot be upgraded in time must document a risk "
          "acceptance signed by their security officer."),
    ("h2", "Workstream 2: Firmware integrity"),
    ("p", "An internal review found a bootloader weakness, tracked as CRV-SEC-2024-011, that allows an "
          "attacker with physical access to load unsigned firmware."),
    ("p", "The fix will make signed firmware images mandatory, and the private release key will be "
          "moved into a hardware security module in Rotterdam."),
    ("p", "From the third quarter, every FieldOS release will be published with a software bill of "
          "materials so that customers can check components against their own vulnerability feeds."),
    ("h2", "Workstream 3: Administrator authentication"),
    ("p", "Administrator access to the gateway management console, Meridian and Tidewater servers will "
          "require a hardware security key."),
    ("p", "Customers will be asked to lower AUTH_TOKEN_TTL_SEC from 3600 to 900 seconds for "
          "administrative accounts on Tidewater."),
    ("p", "Shared accounts such as admin or service will be removed from all Corvane-operated systems, "
          "and every engineer will work with a personal account."),
    ("h2", "Workstream 4: External testing"),
    ("p", "An external penetration test of the FB-340 web interface, the Meridian tenant API and the "
          "office VPN will be commissioned for the fourth quarter."),
    ("p", "A small bug bounty programme for Meridian is planned as a pilot for 2025, subject to the "
          "results of the penetration test."),
    ("h2", "Governance and budget"),
    ("p", "A security steering group chaired by the Head of Security meets monthly and reports progress "
          "to the executive team."),
    ("p", "The budget for the security hardening plan in 2024 is EUR 640,000, of which about half is "
          "allocated to hardware security keys and the hardware security module."),
    ("p", "Progress is measured by three indicators: the share of Tidewater servers with TLS 1.3 enforced, "
          "the share of gateways on a supported FieldOS release, and the share of employees using a "
          "hardware key."),
]

STAFFING_PLAN = [
    ("h1", "Staffing Plan 2024 - Customer and Internal Projects"),
    ("p", "Maintained by the engineering project office under the VP Engineering. Revision for the "
          "third quarter of 2024."),
    ("p", "This plan lists who works on which project and at what allocation. Projects are referred to "
          "by their code names only; the mapping from code names to clients is kept in the strategic "
          "client register."),
    ("h2", "Allocation rules"),
    ("p", "No engineer should be allocated above 90% to customer projects, so that time remains for "
          "support rotations and learning during the cool-down weeks."),
    ("p", "Allocations are reviewed every six weeks at the end of each engineering cycle. Changes that "
          "affect a customer-facing role must be agreed with the responsible account manager."),
    ("h2", "Project Bluefin"),
    ("p", "Tomas Rehak is the lead solutions architect for Project Bluefin, allocated at 80% from April "
          "to December 2024."),
    ("p", "Gareth Pryce and Alison Teague are the two field engineers based in the United Kingdom, each "
          "allocated full time to the regional roll-out."),
    ("p", "Wen Li is the data engineer at 50%, and Hannah Okoro is the project manager at 60%."),
    ("h2", "Project Saltmarsh"),
    ("p", "Sanne de Vries is the data engineer for Project Saltmarsh and built the pipeline behind the "
          "gearbox wear model."),
    ("p", "Bram Hoekstra is the project manager at 40%. Field support is provided by the Rotterdam "
          "service team on request."),
    ("h2", "Project Driftwood"),
    ("p", "Marta Kowalczyk is the hardware integration lead for Project Driftwood and works from the "
          "Gdansk office."),
    ("p", "Her allocation was reduced from 70% to 40% for the third quarter because the pilot was "
          "postponed, and she supports the second-source modem qualification with the remaining time."),
    ("h2", "Project Steppe Pulse"),
    ("p", "Daniyar Omarov is the field engineer for Project Steppe Pulse and works from the Almaty office."),
    ("p", "He is supported by two installers from a local partner company, who are not Corvane "
          "employees and therefore do not appear in this plan."),
    ("h2", "Project Heron"),
    ("p", "Noor Haddad is the QA and validation lead for Project Heron and prepares the computer system "
          "validation documents for the planned migration."),
    ("h2", "Project Lantern (internal)"),
    ("p", "Felix Armbruster leads the platform engineering work for Project Lantern and maintains the "
          "tdw-bridge service used during migrations."),
    ("p", "Three further platform engineers rotate through Lantern migrations depending on the "
          "migration calendar."),
    ("h2", "Open positions"),
    ("p", "Six field engineer positions in Almaty were approved in September. Two site reliability "
          "engineers for the Meridian team in Rotterdam are also open and are expected to start in the "
          "fourth quarter."),
]


# ---------------------------------------------------------------------------
# Minimal hand-written PDF
# ---------------------------------------------------------------------------

PAGE_W, PAGE_H = 595, 842  # A4 in points
MARGIN_X, MARGIN_TOP, MARGIN_BOTTOM = 56, 60, 60
STYLES = {
    # kind: (font resource, size, leading, wrap width in chars, space before)
    "h1": ("F2", 15, 20, 60, 0),
    "h2": ("F2", 12, 16, 75, 8),
    "p": ("F1", 10, 13.5, 90, 4),
    "li": ("F1", 10, 13.5, 86, 2),
}


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _layout(blocks):
    """Return a list of pages; each page is a list of (font, size, x, y, text)."""
    pages, current = [], []
    y = PAGE_H - MARGIN_TOP
    for kind, text in blocks:
        if not text.isascii():
            raise ValueError(f"PDF text must be ASCII: {text!r}")
        font, size, leading, width, before = STYLES[kind]
        if kind == "li":
            lines = textwrap.wrap(text, width=width, initial_indent="- ", subsequent_indent="  ")
        else:
            lines = textwrap.wrap(text, width=width)
        y -= before
        for line in lines:
            if y - leading < MARGIN_BOTTOM:
                pages.append(current)
                current, y = [], PAGE_H - MARGIN_TOP
            y -= leading
            current.append((font, size, MARGIN_X, y, line))
    if current:
        pages.append(current)
    return pages


def write_pdf(path: Path, blocks, title: str) -> None:
    pages = _layout(blocks)
    objects: list[bytes] = []  # objects[i] is object number i + 1

    def add(obj: bytes) -> int:
        objects.append(obj)
        return len(objects)

    catalog = add(b"")  # placeholder, filled below
    pages_obj = add(b"")
    font1 = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    font2 = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>")
    info = add(f"<< /Title ({_pdf_escape(title)}) /Author (Corvane Systems) /Producer (_make_binary_docs.py) >>".encode("ascii"))

    page_ids = []
    for page in pages:
        ops = []
        for font, size, x, y, text in page:
            ops.append(f"BT /{font} {size} Tf 1 0 0 1 {x} {y:.2f} Tm ({_pdf_escape(text)}) Tj ET")
        stream = ("\n".join(ops) + "\n").encode("ascii")
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"endstream")
        page_id = add(
            (f"<< /Type /Page /Parent {pages_obj} 0 R /MediaBox [0 0 {PAGE_W} {PAGE_H}] "
             f"/Resources << /Font << /F1 {font1} 0 R /F2 {font2} 0 R >> >> "
             f"/Contents {content} 0 R >>").encode("ascii")
        )
        page_ids.append(page_id)

    objects[catalog - 1] = f"<< /Type /Catalog /Pages {pages_obj} 0 R >>".encode("ascii")
    kids = " ".join(f"{p} 0 R" for p in page_ids)
    objects[pages_obj - 1] = f"<< /Type /Pages /Kids [{kids}] /Count {len(page_ids)} >>".encode("ascii")

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref_pos = len(out)
    out += b"xref\n0 %d\n" % (len(objects) + 1)
    out += b"0000000000 65535 f \n"
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += (f"trailer\n<< /Size {len(objects) + 1} /Root {catalog} 0 R /Info {info} 0 R >>\n"
            f"startxref\n{xref_pos}\n%%EOF\n").encode("ascii")
    path.write_bytes(bytes(out))


# ---------------------------------------------------------------------------
# DOCX via python-docx
# ---------------------------------------------------------------------------

def write_docx(path: Path, blocks, title: str) -> None:
    import docx  # python-docx

    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.author = "Corvane Systems"
    for kind, text in blocks:
        if kind == "h1":
            document.add_heading(text, level=1)
        elif kind == "h2":
            document.add_heading(text, level=2)
        elif kind == "li":
            document.add_paragraph(text, style="List Bullet")
        else:
            document.add_paragraph(text)
    document.save(str(path))


def main() -> None:
    write_pdf(HERE / "docs" / "q3_2024_report.pdf", Q3_REPORT, "Corvane Systems Quarterly Business Report Q3 2024")
    write_pdf(HERE / "docs" / "board_minutes_2024_09.pdf", BOARD_MINUTES, "Corvane Systems Board Minutes 19 September 2024")
    write_docx(HERE / "docs" / "security_hardening_plan.docx", SECURITY_PLAN, "Security Hardening Plan 2024")
    write_docx(HERE / "docs" / "staffing_plan_2024.docx", STAFFING_PLAN, "Staffing Plan 2024")
    print("wrote q3_2024_report.pdf, board_minutes_2024_09.pdf, security_hardening_plan.docx, staffing_plan_2024.docx")


if __name__ == "__main__":
    main()
