provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "main" {
  name     = "rg-sql"
  location = "westeurope"
}

resource "azurerm_mssql_server" "main" {
  name                          = "sql-acme-prod"
  resource_group_name           = azurerm_resource_group.main.name
  location                      = azurerm_resource_group.main.location
  version                       = "12.0"
  administrator_login           = "sqladmin"
  administrator_login_password  = "ChangeMe-12345!"
  minimum_tls_version           = "1.2"
  public_network_access_enabled = false
}

resource "azurerm_mssql_database" "app" {
  name      = "appdb"
  server_id = azurerm_mssql_server.main.id
  sku_name  = "S0"
}
