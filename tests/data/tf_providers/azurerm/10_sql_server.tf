provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "sql" {
  name     = "rg-sql"
  location = "francecentral"
}

resource "azurerm_mssql_server" "main" {
  name                         = "sql-acme-prod"
  resource_group_name          = azurerm_resource_group.sql.name
  location                     = azurerm_resource_group.sql.location
  version                      = "12.0"
  administrator_login          = "sqladmin"
  administrator_login_password = "not-a-real-password-2!"
  minimum_tls_version          = "1.2"
}

resource "azurerm_mssql_database" "app" {
  name           = "appdb"
  server_id      = azurerm_mssql_server.main.id
  sku_name       = "S1"
  max_size_gb    = 50
  zone_redundant = false

  short_term_retention_policy {
    retention_days = 7
  }
}

resource "azurerm_mssql_firewall_rule" "azure" {
  name             = "allow-azure"
  server_id        = azurerm_mssql_server.main.id
  start_ip_address = "0.0.0.0"
  end_ip_address   = "0.0.0.0"
}
